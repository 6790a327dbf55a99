module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 2, num_stages = 1, staleness = 1>} {}
