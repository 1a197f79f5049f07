"""A file view: displacement, etype and filetype; positions in etypes map to file byte regions."""

from __future__ import annotations

import bisect
import itertools

from mpi4py import MPI

from callid.mpiio.datatypes import Flat, Runs, flatten, merge_runs


def _keep(dtype: MPI.Datatype) -> MPI.Datatype:
    """A handle the view owns (the caller may free its own derived types)."""
    return dtype if dtype.is_predefined else dtype.Dup()


class View:
    """The data of a file as seen through ``(disp, etype, filetype)``: filetypes tile the file."""

    def __init__(self, disp: int = 0, etype: MPI.Datatype = MPI.BYTE,
                 filetype: MPI.Datatype | None = None, datarep: str = "native") -> None:
        self.disp = disp
        self.etype = _keep(etype)
        self.filetype = _keep(filetype if filetype is not None else etype)
        self.datarep = datarep
        self.esize = self.etype.Get_size()
        self.ft: Flat = flatten(self.filetype)
        self._ends = list(itertools.accumulate(n for _, n in self.ft.runs))

    def get(self) -> tuple[int, MPI.Datatype, MPI.Datatype, str]:
        """``(disp, etype, filetype, datarep)`` as ``MPI_File_get_view`` returns them."""
        return self.disp, _keep(self.etype), _keep(self.filetype), self.datarep

    def free(self) -> None:
        for t in (self.etype, self.filetype):
            if not t.is_predefined:
                t.Free()

    def regions(self, pos: int, nbytes: int) -> Runs:
        """File byte regions of ``nbytes`` of data starting at etype position ``pos``."""
        start = pos * self.esize
        ft = self.ft
        if nbytes <= 0 or ft.size == 0:
            return []
        if ft.contiguous:
            return [(self.disp + ft.lb + start, nbytes)]
        tile, within = divmod(start, ft.size)
        i = bisect.bisect_right(self._ends, within)
        skip = within - (self._ends[i - 1] if i else 0)
        out = []
        while nbytes > 0:
            off, n = ft.runs[i]
            take = min(n - skip, nbytes)
            out.append((self.disp + tile * ft.extent + off + skip, take))
            nbytes -= take
            skip = 0
            i += 1
            if i == len(ft.runs):
                i, tile = 0, tile + 1
        return merge_runs(out)

    def byte_offset(self, pos: int) -> int:
        """Absolute byte offset of etype position ``pos``."""
        if self.ft.size == 0:
            return self.disp
        return self.regions(pos, 1)[0][0]

    def position_of(self, byte_offset: int) -> int:
        """Etypes of view data that lie before ``byte_offset`` (rounded up to whole etypes)."""
        rel = byte_offset - self.disp
        ft = self.ft
        if rel <= 0 or ft.size == 0:
            return 0
        if ft.contiguous:
            data = max(0, rel - ft.lb)
        else:  # (tile k spans [lb + k * extent, lb + (k + 1) * extent) of the view)
            tiles, rem = divmod(rel - ft.lb, ft.extent)
            data = tiles * ft.size + sum(max(0, min(n, rem + ft.lb - off)) for off, n in ft.runs)
        return max(0, -(-data // self.esize))
