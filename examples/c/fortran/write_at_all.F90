! Each rank writes its block of doubles to a shared file with MPI_File_write_at_all (explicit offsets,
! collective), reads it back with MPI_File_read_at_all and checks it: Fortran on the MPI library's
! MPI-IO, through the mpi module, or with -DF08 the mpi_f08 module (whose bindings call PMPI_File_*
! themselves: callid's interposition library defines those names too).
!
!     mpif90 -o write_at_all examples/c/fortran/write_at_all.F90          (Debian's MPICH: libmpich-dev,
!     mpif90 -DF08 -o write_at_all_f08 examples/c/fortran/write_at_all.F90            gfortran)
!     callid run -n 4 ./write_at_all -f /pvfs2/write_at_all
!
! (callid run runs a program built against Debian's MPICH on the mpich wheel's MPI, the same MPICH ABI:
! see docs/c-programs.md.)
!
! -f FILE (default /pvfs2/write_at_all); -n N doubles per rank (default 65536).  Element k of rank r
! holds r * N + k; rank 0 prints the data check, and the exit status is 1 if any rank read back other
! values (or an MPI-IO call failed).
program write_at_all
#ifdef F08
    use mpi_f08
    implicit none
    type(MPI_File) :: fh
    type(MPI_Status) :: status
#else
    use mpi
    implicit none
    integer :: fh
    integer :: status(MPI_STATUS_SIZE)
#endif
    integer :: ierr, rank, nranks, i, nargs, n, ok, all_ok, err
    integer(kind=MPI_OFFSET_KIND) :: offset
    character(len=1024) :: file, arg
    double precision, allocatable :: mine(:), back(:)

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    file = '/pvfs2/write_at_all'
    n = 65536
    nargs = command_argument_count()
    i = 1
    do while (i <= nargs)
        call get_command_argument(i, arg)
        if (trim(arg) == '-f' .and. i < nargs) then
            call get_command_argument(i + 1, file)
            i = i + 2
        else if (trim(arg) == '-n' .and. i < nargs) then
            call get_command_argument(i + 1, arg)
            read (arg, *, iostat=err) n
            if (err /= 0) n = -1
            i = i + 2
        else
            n = -1
            exit
        end if
    end do
    if (n <= 0) then
        if (rank == 0) write (0, '(a)') 'usage: write_at_all [-f FILE] [-n DOUBLES-PER-RANK]'
        call MPI_Finalize(ierr)
        call exit(2)
    end if

    allocate (mine(n), back(n))
    do i = 1, n
        mine(i) = dble(rank) * n + (i - 1)
    end do
    back = -1d0
    offset = int(rank, MPI_OFFSET_KIND) * n * 8
    ok = 1

    call MPI_File_open(MPI_COMM_WORLD, trim(file), ior(MPI_MODE_RDWR, MPI_MODE_CREATE), MPI_INFO_NULL, fh, ierr)
    if (ierr /= MPI_SUCCESS) then
        ok = 0
    else
        call MPI_File_write_at_all(fh, offset, mine, n, MPI_DOUBLE_PRECISION, status, ierr)
        if (ierr /= MPI_SUCCESS) ok = 0
        call MPI_File_read_at_all(fh, offset, back, n, MPI_DOUBLE_PRECISION, status, ierr)
        if (ierr /= MPI_SUCCESS) ok = 0
        call MPI_File_close(fh, ierr)
        if (ierr /= MPI_SUCCESS) ok = 0
    end if
    if (any(back /= mine)) ok = 0

    ! (MPI_MIN: MPI_LAND is not defined for Fortran INTEGER, and MPICH 5 rejects it)
    call MPI_Allreduce(ok, all_ok, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
        write (*, '(a, i0, a, i0, a, a)') '# write_at_all: ', n, ' doubles per rank on ', nranks, ' ranks: ', trim(file)
        if (all_ok /= 0) then
            write (*, '(a)') '# data check: passed'
        else
            write (*, '(a)') '# data check: FAILED'
        end if
    end if
    deallocate (mine, back)
    call MPI_Finalize(ierr)
    if (all_ok == 0) call exit(1)
end program write_at_all
