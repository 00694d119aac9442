"""What a call carries in, before its tool runs: the arguments as the model wrote them, read,
checked and resolved (`arguments`), its "not given" nulls (`nulls`) and its redeemed artifacts
(`wants`)."""
