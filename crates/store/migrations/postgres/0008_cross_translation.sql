-- A cross-device evaluation of a kernel in another language than the
-- device's (a CUDA run's winner measured through OpenCL) runs a
-- translation of the stored source; the translated text is kept with the
-- result, so what was measured can be read and compiled again. NULL when
-- the stored source ran as it is. Keep in step with
-- ../sqlite/0008_cross_translation.sql.
ALTER TABLE cross_evaluations ADD COLUMN translated_source TEXT;
