SELECT count(*) AS runs FROM ql3.runs
