"""ascendsim.passes"""
