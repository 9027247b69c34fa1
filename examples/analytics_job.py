"""A Spark job over a durableq file, to run with spark-submit.

    spark-submit --master 'local[2]' --name queue-report examples/analytics_job.py demo.db
    spark-submit --master spark://host:7077 examples/analytics_job.py /data/queue.db --snapshot-dir /shared

spark-submit's master, application name and settings are used as they are;
durableq adds the SQLite JDBC driver to the session (``ADD JAR``) unless
``--jars`` already brings one.  spark-submit runs the job with ``python3``
unless ``PYSPARK_PYTHON`` names the Python that has durableq installed.
"""

from __future__ import annotations

import argparse

from durableq.analytics import QueueAnalytics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", help="the durableq file")
    parser.add_argument("--snapshot-dir", help="a folder every executor can read, for the snapshot copy")
    args = parser.parse_args()
    with QueueAnalytics.open(args.db, snapshot_dir=args.snapshot_dir) as analytics:
        spark = analytics.spark
        print(
            f"application {spark.sparkContext.appName} on {spark.sparkContext.master} "
            f"(shuffle partitions {spark.conf.get('spark.sql.shuffle.partitions')}, "
            f"time zone {spark.conf.get('spark.sql.session.timeZone')})"
        )
        print(f"snapshot taken at {analytics.taken_at:%Y-%m-%d %H:%M:%S} UTC")
        analytics.depth_by_state().show()


if __name__ == "__main__":
    main()
