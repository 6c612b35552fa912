"""`python -m deerflow_ckpt` runs the `ckpt` command line."""

from deerflow_ckpt.cli.app import main

if __name__ == "__main__":
    main()
