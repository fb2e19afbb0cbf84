-- Bench (worker): the highest Run id so far (0 when none): a cell counts the Runs after it.
SELECT coalesce(max(id), 0) AS run_id FROM ql3.runs
