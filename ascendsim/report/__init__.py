"""ascendsim.report"""
