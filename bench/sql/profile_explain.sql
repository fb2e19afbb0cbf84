-- The plan of one of QL3's own statements (its shipped text, filled in below by psycopg's
-- sql.SQL.format; parameters bound as the repository binds them), executed for real: the caller
-- rolls the transaction back.
EXPLAIN (ANALYZE, BUFFERS)
{statement}
