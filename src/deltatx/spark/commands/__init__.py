"""One module per command; each stages its work into an OptimisticTransaction."""
