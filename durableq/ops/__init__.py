"""The SQS operations: each rule of the contract, with its SQL, on a connection an engine gives.

The public handles (``broker``, ``queue``, ``handle``, ``virtual``) make one call each into
``broker_calls``, ``queue_calls`` and ``message_calls``, which own a whole call: its transaction, its
audit row, the cached queue row, the payload files.  Nothing here imports a public handle.
"""
