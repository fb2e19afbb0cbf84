SELECT current_setting('server_version') AS version, version() AS full_version
