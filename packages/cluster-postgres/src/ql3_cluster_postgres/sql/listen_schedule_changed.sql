-- Wake-ups for idle Coordinators: admin changes and released claims notify this channel.
LISTEN ql3_schedule_changed
