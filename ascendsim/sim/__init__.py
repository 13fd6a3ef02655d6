"""ascendsim.sim"""
