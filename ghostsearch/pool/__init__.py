"""The scoring pool: scorer actors behind one broker (actors.py); a driver's one way to a pool,
``PoolSession`` (session.py: connect, start, release), over joining Ray (cluster.py) and the pool's
lifecycle (pool.py); and the client a searcher evaluates through (client.py)."""
