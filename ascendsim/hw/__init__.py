"""ascendsim.hw"""
