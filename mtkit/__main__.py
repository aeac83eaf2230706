"""`python -m mtkit` (and `torchrun -m mtkit train ...`)."""

from mtkit.cli import cli

if __name__ == "__main__":
    cli(prog_name="mtkit")
