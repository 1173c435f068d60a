"""The sort family's calls above dispatch, one module prefix per operation:

- axes: any axis of an N-D array as rows, and ragged segments (every operation);
- sort_*: plans (sort_plan), repeated calls made again without the general
  path (sort_prepared, with the results it keeps in sort_kept), and merges
  (sort_merge);
- select*: topk, partition and argpartition (select, select_prepared);
- search: searchsorted;
- unique*: unique (unique), and unique rows (unique_rows);
- multikey: lexsort, structured keys with order=, sort_by_key of several keys.
"""
