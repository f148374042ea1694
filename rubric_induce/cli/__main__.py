"""``python -m rubric_induce.cli``."""
from rubric_induce.cli import main

main()
