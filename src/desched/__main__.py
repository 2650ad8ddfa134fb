"""`python -m desched`: the `desched` command."""

from desched.commands.cli import main

main(prog_name="desched")
