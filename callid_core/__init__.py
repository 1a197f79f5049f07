"""The vocabulary every part of callid shares; it imports nothing else of the project.

``ids`` (the CallID layout), ``units`` (sizes and durations), ``errors`` (the one
error base), ``config`` (the file system's configuration and every default),
``clock`` (clock domains and injected skew), ``schema`` (the log columns and row
builders), ``tables`` (the merged tables), ``partlog`` (the Parquet part writer)
and ``atomic`` (outputs written under a temporary name).
"""
