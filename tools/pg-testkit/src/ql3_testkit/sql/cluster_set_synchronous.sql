ALTER SYSTEM SET synchronous_standby_names = {names}
