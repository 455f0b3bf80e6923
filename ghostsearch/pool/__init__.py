"""The scoring pool: scorer actors behind one broker (actors.py), and how a driver starts, finds
and evaluates through it (pool.py)."""
