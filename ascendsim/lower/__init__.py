"""ascendsim.lower"""
