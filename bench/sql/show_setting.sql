SELECT current_setting(%(name)s) AS value
