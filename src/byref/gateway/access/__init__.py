"""Who a request runs as: the bearer check (`bearer`: static tokens, JWTs, grants) and the scope
state a principal's requests share (`scopes`)."""
