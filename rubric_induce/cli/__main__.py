"""``python -m rubric_induce.cli``."""
from . import main

main()
