"""Training learned policies from LeRobotDatasets (``simroll train``)."""
