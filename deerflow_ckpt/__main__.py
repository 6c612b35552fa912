"""`python -m deerflow_ckpt` runs the `ckpt` command line."""

from deerflow_ckpt.cli.launch import main

if __name__ == "__main__":
    main()
