def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long test (minutes on CPU); .ci/run still runs it")
