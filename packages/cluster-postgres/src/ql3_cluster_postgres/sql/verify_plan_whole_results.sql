-- verify_history: plan every server-side cursor of this transaction for reading its whole result
-- (the default, 0.1, plans for the first tenth and picks index scans that visit the table in
-- random order: the runs of one schedule lie on every page of a live history).
SET LOCAL cursor_tuple_fraction = 1.0
