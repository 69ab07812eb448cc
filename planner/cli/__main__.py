"""``python -m planner.cli``: the same command line as the ``gpuplan`` script."""

from planner.cli.app import main

if __name__ == "__main__":
    main()
