-- prune_history: the shortest age history may be pruned at (migration 0012), to refuse before
-- anything is sent and name the flag.
SELECT ql3.history_prune_floor_ms() AS floor_ms
