def __getattr__(name):  # ghostsearch.load_pruned, imported lazily (keeps `import ghostsearch` light)
    if name == "load_pruned":
        from ghostsearch.recovery.export import load_pruned

        return load_pruned
    raise AttributeError(name)
