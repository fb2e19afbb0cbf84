SELECT 1 AS ready
