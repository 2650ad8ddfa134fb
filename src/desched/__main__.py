"""`python -m desched`: the `desched` command."""

from desched.cli import main

main(prog_name="desched")
