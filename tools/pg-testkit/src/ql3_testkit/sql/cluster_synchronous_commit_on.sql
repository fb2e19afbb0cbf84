-- Synchronous replication waits only when synchronous_commit is on (test clusters turn it off).
ALTER SYSTEM SET synchronous_commit = 'on'
