-- The bare commit loop's table: one row per durable commit, stamped by the database clock; no
-- index, so a commit costs its WAL record and its flush, nothing else.
CREATE TABLE IF NOT EXISTS public.ceiling_commits (
    at timestamptz NOT NULL
)
