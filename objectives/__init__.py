"""Your own calibration objectives (a plug-in folder; the built-in ones live in ghostsearch/objectives/).

Name one in a config as ``objective: objectives.<module>:<Class>``; see README.md here."""
