"""Prompt templates, shipped as package data (``rubric_induce.prompts``); see README.md here."""
