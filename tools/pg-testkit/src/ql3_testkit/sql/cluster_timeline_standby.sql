-- The timeline a server in recovery last checkpointed on (pg_walfile_name fails during recovery).
SELECT timeline_id FROM pg_control_checkpoint()
