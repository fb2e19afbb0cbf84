-- Wake-ups for idle workers: every transaction that queued attempts notifies this channel
-- (migration 0015).
LISTEN ql3_attempt_queued
