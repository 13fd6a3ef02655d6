"""ascendsim.frontend"""
