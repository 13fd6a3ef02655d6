"""ascendsim.models"""
