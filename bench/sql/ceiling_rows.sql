-- Rows the commit loop has written so far (each one a committed transaction).
SELECT count(*) AS n FROM public.ceiling_commits
