version = "0.10.0"
