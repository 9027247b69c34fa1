"""A job-queue example: ``producer.py`` sends thumbnail jobs, ``handlers.py`` does them."""
