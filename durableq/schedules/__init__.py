"""Schedules: messages sent on a timetable (``Broker.create_schedule``; docs/guides/schedules.md)."""
