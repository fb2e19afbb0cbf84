SELECT count(*)::bigint AS runs FROM ql3.runs
