"""Batch scoring: a CSV or Parquet file (or a stored dataset) scored by a model in chunk jobs spread over the worker
pool, the scored rows downloaded as Parquet or CSV.

- Submission (the API, :class:`BatchScoring`): the model is resolved for the tenant, the file's header (CSV) or
  schema (Parquet) is checked against the model's columns (a missing column, a type no value of which can be scored:
  :class:`Invalid`, 422), then the rows are read ``chunk_rows`` at a time (``ParquetFile.iter_batches``, pyarrow's
  streaming CSV reader) and each chunk is stored in Redis as an Arrow IPC blob (``Keys.batch_input``). One job per
  chunk (kind ``batch_chunk``) and a parent (kind ``batch``) that waits for them are recorded as a grid's cells and
  parent are (``JobLifecycle.create_all``; the last chunk to end queues the parent: app/core/records.py): retries
  after a lost worker, cancel and deletion are the jobs' own. Chunks are stored, recorded and queued a group at a time
  (at most ``SUBMIT_CHUNKS`` chunks or ``SUBMIT_BYTES`` of input in a few pipelined round trips), so that a file of
  10,000 chunks is answered in seconds, and workers start on the first group while the next is read. Memory is
  bounded by one group of chunks, not by the file, in the API, and by one chunk in every worker; no worker reads
  another's disk. A chunk is at least FIRE_BATCH_MIN_CHUNK_ROWS rows (422 below: a job's own cost would dominate).
- A chunk job (``worker/batch.py``) scores its rows with :func:`score_chunk` and stores the scored rows
  (``Keys.batch_output``) and, beside them, its rows' drift counts (``Keys.batch_counts``): the batch adds its
  chunks' counts to the model's drift once it succeeded, once, so that only rows delivered are counted. A row that
  cannot be scored (a number column holding text, an unseen level) fails the chunk with an error naming the column
  and the file's first bad row, and marks the batch so that later chunks stop early (earlier ones still run: the
  first bad row of the file is the one named).
- The parent succeeds once every chunk did (and adds their drift counts); if one failed it fails with that chunk's
  error, and every scored part and count is deleted: a failed job has no result and counts nothing, nothing is
  half-written. The result is streamed part by part
  (:meth:`BatchScoring.stream_result`).

The scored columns: ``row`` (the row's number in the file, from 0), the ``id_column`` where one is named,
``prediction`` (a number, a rate, a Cox model's hazard ratio, or a classifier's label: ``/predict``'s),
``probability_{class}`` per class (classifiers), ``survival_{t}`` per time (a Cox model, where ``times`` are given)
and, with ``explain``, ``rules`` (the ids of the rules that fired), ``contributions`` (what each adds to the score)
and ``linear_contributions`` (a model with linear terms): lists in Parquet, JSON text in CSV.
"""
